"""Data-quality gate: fail loudly unless every stage of the day's pipeline agrees.

    python check_quality.py --day-dir DIR --loaded-trips N --loaded-zones Z

Checks, against the generator's manifest:
- the Parquet trips hold exactly the manifest's clean trips, with unique trip ids and no negative fare;
- Spark's summary saw every raw row;
- the daily aggregates in Parquet add up to the trip count;
- PostgreSQL (the SQL task's OUT params) holds the same number of trips and zones.
Exit code 1 with one line per failed check otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--day-dir", required=True)
    parser.add_argument("--loaded-trips", required=True)
    parser.add_argument("--loaded-zones", required=True)
    args = parser.parse_args()
    day = Path(args.day_dir)
    manifest = json.loads((day / "manifest.json").read_text())
    summary = json.loads((day / "summary.json").read_text())
    trips = pq.read_table(day / "trips", columns=["trip_id", "fare"])
    daily = pq.read_table(day / "daily_zone", columns=["zone_id", "trips"])
    checks = {
        "parquet trips == manifest clean trips": (trips.num_rows, manifest["clean"]),
        "unique trip ids": (len(pc.unique(trips["trip_id"])), trips.num_rows),
        "no negative fare": (pc.sum(pc.less(trips["fare"], 0)).as_py() or 0, 0),
        "spark read every raw row": (summary["raw_rows"], manifest["rows"]),
        "daily aggregates add up": (pc.sum(daily["trips"]).as_py(), trips.num_rows),
        "postgres trips == parquet trips": (_int(args.loaded_trips), trips.num_rows),
        "postgres zones == parquet zones": (_int(args.loaded_zones), daily.num_rows),
    }
    failed = 0
    for name, (got, want) in checks.items():
        ok = got == want
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {got} (expected {want})")
    dropped = manifest["rows"] - trips.num_rows
    print(f"{manifest['rows']} raw rows -> {trips.num_rows} clean trips ({dropped} dropped: "
          f"{manifest['duplicates']} duplicates, {manifest['dirty']})")  # fmt: skip
    if failed:
        print(f"data quality check FAILED: {failed} check(s)", file=sys.stderr)
        return 1
    print("data quality check passed")
    return 0


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


if __name__ == "__main__":
    sys.exit(main())
