"""A local run's jobs as forks of one process that has imported torch: the server (server.py), started
by the Snakefile, and each job's side of it (client.py), which the CLI tries before it runs a command.
The server runs the CLI's commands and the CLI hands them to it, so the room sits beside the CLI, on top."""
