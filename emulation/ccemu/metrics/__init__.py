"""Live metrics: the collector, Prometheus, the Grafana dashboards."""
