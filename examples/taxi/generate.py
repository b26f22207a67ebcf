"""Deterministic generator of one business day of taxi trips (CSV), with dirty rows on purpose.

    python generate.py --date 20261121 --rows 300000 --out DIR

Writes ``DIR/trips.csv``, ``DIR/zones.csv`` and ``DIR/manifest.json``. The same date and row count
always give the same bytes (the random generator is seeded with both). The manifest says exactly how
many rows of each kind of dirt were written and how many clean trips a correct cleaning must keep,
so the quality check downstream can prove the pipeline lost and invented nothing.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import random
from pathlib import Path

BOROUGHS = ("Manhattan", "Brooklyn", "Queens", "Bronx", "Staten Island", "EWR")
ZONES = [(i, f"Zone {i:02d}", BOROUGHS[i % len(BOROUGHS)]) for i in range(1, 41)]
PAYMENTS = ("card", "cash", "app")
# kinds of dirty rows and how often each appears (of all generated rows)
DIRT = {
    "negative_fare": 0.006,
    "dropoff_before_pickup": 0.005,
    "unknown_zone": 0.004,
    "malformed_distance": 0.003,
    "missing_pickup_time": 0.002,
}
DUPLICATE_RATE = 0.004
COLUMNS = ("trip_id", "pickup_ts", "dropoff_ts", "pickup_zone", "dropoff_zone", "passengers", "distance_km",
           "fare", "tip", "payment_type")  # fmt: skip


def _clean_trip(rng: random.Random, day: dt.datetime, trip_id: int) -> list[str]:
    # busier in the morning and evening peaks
    hour = rng.choices(range(24), weights=[2, 1, 1, 1, 1, 2, 4, 8, 9, 7, 6, 6, 7, 6, 6, 7, 8, 9, 9, 8, 6, 5, 4, 3])[0]
    pickup = day + dt.timedelta(hours=hour, seconds=rng.randrange(3600))
    distance = round(rng.uniform(0.5, 30.0), 2)
    speed = rng.uniform(10.0, 60.0)
    duration = dt.timedelta(minutes=max(distance / speed * 60, 1.0))
    fare = round(3.0 + distance * 1.75 + duration.total_seconds() / 60 * 0.35, 2)
    payment = rng.choices(PAYMENTS, weights=[6, 3, 1])[0]
    tip = round(fare * rng.uniform(0.0, 0.25), 2) if payment != "cash" else 0.0
    return [
        f"T{day:%Y%m%d}-{trip_id:07d}",
        pickup.isoformat(sep=" "),
        (pickup + duration).isoformat(sep=" ", timespec="seconds"),
        str(rng.randrange(1, len(ZONES) + 1)),
        str(rng.randrange(1, len(ZONES) + 1)),
        str(rng.randint(1, 4)),
        f"{distance:.2f}",
        f"{fare:.2f}",
        f"{tip:.2f}",
        payment,
    ]


def _dirty(kind: str, row: list[str]) -> list[str]:
    row = list(row)
    if kind == "negative_fare":
        row[7] = f"-{row[7]}"
    elif kind == "dropoff_before_pickup":
        row[1], row[2] = row[2], row[1]
    elif kind == "unknown_zone":
        row[3] = "999"
    elif kind == "malformed_distance":
        row[6] = "n/a"
    elif kind == "missing_pickup_time":
        row[1] = ""
    return row


def generate(date: str, rows: int, out: Path) -> dict[str, object]:
    day = dt.datetime.strptime(date, "%Y%m%d")
    rng = random.Random(f"{date}:{rows}")
    out.mkdir(parents=True, exist_ok=True)
    counts = dict.fromkeys(DIRT, 0)
    clean = duplicates = 0
    written = 0
    with open(out / "trips.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(COLUMNS)
        trip_id = 0
        while written < rows:
            trip_id += 1
            row = _clean_trip(rng, day, trip_id)
            roll = rng.random()
            kind = None
            edge = 0.0
            for name, rate in DIRT.items():
                edge += rate
                if roll < edge:
                    kind = name
                    break
            if kind is not None:
                w.writerow(_dirty(kind, row))
                counts[kind] += 1
                written += 1
                continue
            w.writerow(row)
            clean += 1
            written += 1
            if written < rows and rng.random() < DUPLICATE_RATE:
                w.writerow(row)  # the same trip delivered twice: cleaning keeps one
                duplicates += 1
                written += 1
    with open(out / "zones.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(("zone_id", "zone_name", "borough"))
        w.writerows(ZONES)
    manifest = {"date": date, "rows": written, "clean": clean, "duplicates": duplicates, "dirty": counts}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--date", required=True, help="business date, yyyyMMdd")
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    manifest = generate(args.date, args.rows, Path(args.out))
    print(json.dumps(manifest))


if __name__ == "__main__":
    main()
