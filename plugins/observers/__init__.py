"""Observer plugins: implement lifecycle hooks (metrics sinks, dashboards)."""
