"""PySpark job: clean, enrich and aggregate one business day of taxi trips.

    spark-submit clean_aggregate.py --day-dir DIR --date yyyyMMdd

Reads ``DIR/trips.csv`` and ``DIR/zones.csv`` (written by generate.py) and writes:

- ``DIR/trips/``            clean, enriched trips as Parquet, partitioned by business_date and payment_type
- ``DIR/daily_zone/``       per pickup zone aggregates as Parquet
- ``DIR/daily_zone_csv/``   the same aggregates as one CSV file (the SQL task loads it into PostgreSQL)
- ``DIR/summary.json``      row counts of each stage

Cleaning rules: unparsable or missing times and numbers, negative fares, non-positive distances,
drop-offs not after pick-ups and unknown zones are dropped; a trip id seen twice is kept once.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

RAW = T.StructType([T.StructField(name, T.StringType()) for name in (
    "trip_id", "pickup_ts", "dropoff_ts", "pickup_zone", "dropoff_zone", "passengers", "distance_km", "fare", "tip",
    "payment_type")])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--day-dir", required=True)
    parser.add_argument("--date", required=True)
    args = parser.parse_args()
    day = Path(args.day_dir)
    spark = (
        SparkSession.builder.appName(f"taxi-clean-{args.date}")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    raw = spark.read.csv(str(day / "trips.csv"), header=True, schema=RAW, mode="PERMISSIVE")
    zones = spark.read.csv(str(day / "zones.csv"), header=True, inferSchema=True)
    typed = raw.select(
        "trip_id",
        F.to_timestamp("pickup_ts", "yyyy-MM-dd HH:mm:ss").alias("pickup_ts"),
        F.to_timestamp("dropoff_ts", "yyyy-MM-dd HH:mm:ss").alias("dropoff_ts"),
        F.col("pickup_zone").try_cast("int").alias("pickup_zone"),
        F.col("dropoff_zone").try_cast("int").alias("dropoff_zone"),
        F.col("passengers").try_cast("int").alias("passengers"),
        F.col("distance_km").try_cast("double").alias("distance_km"),
        F.col("fare").try_cast("double").alias("fare"),
        F.col("tip").try_cast("double").alias("tip"),
        "payment_type",
    )
    valid = typed.where(
        F.col("trip_id").isNotNull()
        & F.col("pickup_ts").isNotNull()
        & F.col("dropoff_ts").isNotNull()
        & (F.col("dropoff_ts") > F.col("pickup_ts"))
        & F.col("distance_km").isNotNull()
        & (F.col("distance_km") > 0)
        & F.col("fare").isNotNull()
        & (F.col("fare") >= 0)
        & F.col("passengers").isNotNull()
    ).dropDuplicates(["trip_id"])
    known = zones.select(F.col("zone_id").alias("pickup_zone"), "zone_name", "borough")
    trips = (
        valid.join(F.broadcast(known), "pickup_zone", "inner")
        .join(F.broadcast(known.select(F.col("pickup_zone").alias("dropoff_zone"))), "dropoff_zone", "inner")
        .withColumn("duration_min", (F.unix_timestamp("dropoff_ts") - F.unix_timestamp("pickup_ts")) / 60.0)
        .withColumn("speed_kmh", F.col("distance_km") / (F.col("duration_min") / 60.0))
        .withColumn("pickup_hour", F.hour("pickup_ts"))
        .withColumn("business_date", F.to_date(F.lit(args.date), "yyyyMMdd"))
        .cache()
    )
    trips.write.mode("overwrite").partitionBy("business_date", "payment_type").parquet(str(day / "trips"))
    daily = (
        trips.groupBy("business_date", F.col("pickup_zone").alias("zone_id"), "zone_name", "borough")
        .agg(
            F.count("*").alias("trips"),
            F.sum("passengers").alias("passengers"),
            F.round(F.sum("fare"), 2).alias("total_fare"),
            F.round(F.sum("tip"), 2).alias("total_tip"),
            F.round(F.avg("distance_km"), 3).alias("avg_distance_km"),
            F.round(F.avg("duration_min"), 3).alias("avg_duration_min"),
        )
        .orderBy("zone_id")
    )
    daily.write.mode("overwrite").parquet(str(day / "daily_zone"))
    daily.coalesce(1).write.mode("overwrite").option("header", True).csv(str(day / "daily_zone_csv"))
    summary = {
        "raw_rows": raw.count(),
        "valid_rows": valid.count(),
        "clean_rows": trips.count(),
        "zones": daily.count(),
    }
    (day / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))
    spark.stop()


if __name__ == "__main__":
    main()
