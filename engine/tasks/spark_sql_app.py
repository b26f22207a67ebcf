"""PySpark application that runs a Spark SQL script (SPARK tasks with programType SQL).

usage: spark-submit app.py statements.json — statements separated by ';', results of the last
query printed (bounded)."""

import json
import sys

from pyspark.sql import SparkSession


def main() -> int:
    with open(sys.argv[1]) as fh:
        job = json.load(fh)
    spark = SparkSession.builder.getOrCreate()
    try:
        statements = [s.strip() for s in job["sql"].split(";") if s.strip()]
        result = None
        for stmt in statements:
            print(f"spark sql: {stmt}", flush=True)
            result = spark.sql(stmt)
        if result is not None and result.columns:
            rows = result.take(job.get("max_rows", 100) + 1)
            print("\t".join(result.columns))
            for row in rows[: job.get("max_rows", 100)]:
                print("\t".join("" if v is None else str(v) for v in row))
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
