"""Write the Grafana dashboard for Porpoise's metrics (docs/grafana/porpoise.json) from the catalogue:
``python -m engine.metrics_dashboard > docs/grafana/porpoise.json`` (tests/test_metrics.py checks the
committed file is current)."""

from __future__ import annotations

import json
import sys
from typing import Any

from engine.metrics import CATALOG, Spec


def _expr(role: str, spec: Spec) -> list[tuple[str, str]]:
    """(PromQL, legend) for one metric: rates for counters, p50/p95 for histograms, values for gauges."""
    name = f"porpoise_{role}_{spec.name}"
    by = ", ".join(("instance", *spec.labels))
    if spec.kind == "counter":
        return [
            (
                f"sum by ({by}) (rate({name}_total[5m]))",
                "{{instance}} " + " ".join(f"{{{{{lb}}}}}" for lb in spec.labels),
            )
        ]
    if spec.kind == "histogram":
        return [
            (
                f"histogram_quantile({q}, sum by (le, {by}) (rate({name}_bucket[5m])))",
                f"p{int(q * 100)} " + "{{instance}}",
            )
            for q in (0.5, 0.95)
        ]
    return [(name, "{{instance}} " + " ".join(f"{{{{{lb}}}}}" for lb in spec.labels))]


def dashboard() -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    y = 0
    for role, specs in CATALOG.items():
        panels.append({"type": "row", "title": role, "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "collapsed": False})
        y += 1
        for i, spec in enumerate(specs):
            unit = "s" if spec.name.endswith("_seconds") else ("ops" if spec.kind == "counter" else "short")
            panels.append(
                {
                    "type": "timeseries",
                    "title": f"{role}: {spec.name}",
                    "description": spec.help,
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                    "gridPos": {"h": 7, "w": 8, "x": (i % 3) * 8, "y": y + (i // 3) * 7},
                    "targets": [
                        {"refId": chr(65 + n), "expr": expr, "legendFormat": legend}
                        for n, (expr, legend) in enumerate(_expr(role, spec))
                    ],
                }
            )
        y += ((len(specs) + 2) // 3) * 7
    for n, panel in enumerate(panels, 1):
        panel["id"] = n
    return {
        "title": "Porpoise",
        "uid": "porpoise",
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "tags": ["porpoise"],
        "templating": {
            "list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"}]
        },
        "panels": panels,
    }


def main() -> None:
    json.dump(dashboard(), sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
