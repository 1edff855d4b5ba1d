"""The resolved study: the config loaded, checked and scaled, its experiments and their shorter budgets,
and the models' shapes on the meta device that the checks read. Every command that reads the config
and the workflow's parse import it; it imports the stages below it and nothing that runs a job."""
