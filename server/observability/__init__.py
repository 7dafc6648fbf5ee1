"""Operating Proctor: Prometheus metrics, structured logs, health probes, graceful shutdown."""
