// Package dashboards holds a Grafana dashboard and Prometheus alerting
// rules for the metrics of package lockotel, as the OpenTelemetry
// Prometheus exporter names them: locksmith.json and alerts.yml. Its test
// runs a Prometheus server that scrapes a process doing contended locking,
// and checks that every query of the dashboard and every rule's expression
// returns data. The repository's docs/observability.md describes them
// ("Dashboard and alerts").
//
// It is a module of its own, so that the exporter and the Prometheus
// client are no dependencies of the library.
package dashboards
