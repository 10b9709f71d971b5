"""Judge executors: run generated (untrusted) getters and metrics safely, plus the rule validator."""
