"""Planning a run before it starts: its jobs, GPU-hours and disk (plan), this machine's CPU stages timed
(calibrate) and the configured models' sizes (param-count). Each reads the resolved study and runs no job."""
