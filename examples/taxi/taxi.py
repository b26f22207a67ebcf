"""The example pipeline as Python code: the twin of taxi.yaml (the same workflow document).

    porpoise apply examples/taxi/taxi.py          # like `porpoise apply examples/taxi/taxi.yaml`
    python examples/taxi/taxi.py                  # apply, start and wait, through the SDK

generate --> clean_aggregate (Spark) --> load_postgres (SQL) --> quality_check (Python)
"""

from porpoise import Python, Spark, Sql, Workflow

GENERATE = """\
import runpy, sys
sys.argv = ["generate.py", "--date", "${biz_date}", "--rows", "${rows}", "--out", "${data_root}/${biz_date}"]
runpy.run_path("${example_dir}/generate.py", run_name="__main__")
"""
CHECK = """\
import runpy, sys
sys.argv = ["check_quality.py", "--day-dir", "${data_root}/${biz_date}",
            "--loaded-trips", "${loaded_trips}", "--loaded-zones", "${loaded_zones}"]
runpy.run_path("${example_dir}/check_quality.py", run_name="__main__")
"""
CREATE_TABLE = (
    "CREATE TABLE IF NOT EXISTS daily_zone_stats (\n"
    "  business_date date NOT NULL, zone_id integer NOT NULL, zone_name text NOT NULL, borough text NOT NULL,\n"
    "  trips integer NOT NULL, passengers integer NOT NULL, total_fare numeric(14,2) NOT NULL,\n"
    "  total_tip numeric(14,2) NOT NULL, avg_distance_km numeric(10,3) NOT NULL,\n"
    "  avg_duration_min numeric(10,3) NOT NULL, loaded_at timestamptz NOT NULL DEFAULT now(),\n"
    "  PRIMARY KEY (business_date, zone_id))"
)
COLUMNS = ["business_date", "zone_id", "zone_name", "borough", "trips", "passengers", "total_fare", "total_tip",
           "avg_distance_km", "avg_duration_min"]  # fmt: skip

with Workflow(
    "taxi_daily",
    project="examples",
    description="Clean, enrich and aggregate one day of taxi trips; load the daily zone stats into PostgreSQL",
    params={"biz_date": "$[yyyyMMdd]", "data_root": "/tmp/porpoise-example", "example_dir": "examples/taxi",
            "rows": "300000", "spark_master": "local[2]"},
) as wf:  # fmt: skip
    generate = Python(
        "generate", GENERATE, retries=1, retry_interval=0,
        description="Write the day's raw trips (deterministic, with dirty rows) and the zone list",
    )  # fmt: skip
    clean = Spark(
        "clean_aggregate",
        main_file="${example_dir}/clean_aggregate.py",
        main_args="--day-dir ${data_root}/${biz_date} --date ${biz_date}",
        master="${spark_master}",
        driver_memory="1g",
        executor_memory="512m",
        conf={"spark.sql.shuffle.partitions": "4"},
        retries=1, retry_interval=0, timeout=30, timeout_strategy="FAILED",
        description="Clean, enrich, deduplicate; trips as partitioned Parquet, per-zone daily aggregates",
    )  # fmt: skip
    load = Sql(
        "load_postgres",
        "warehouse",
        "SELECT count(*) AS loaded_zones, coalesce(sum(trips), 0) AS loaded_trips "
        "FROM daily_zone_stats WHERE business_date = to_date('${biz_date}', 'YYYYMMDD')",
        pre_statements=[CREATE_TABLE,
                        "DELETE FROM daily_zone_stats WHERE business_date = to_date('${biz_date}', 'YYYYMMDD')"],
        load_files=[{"file": "${data_root}/${biz_date}/daily_zone_csv/*.csv", "table": "daily_zone_stats",
                     "columns": COLUMNS}],
        outputs=["loaded_zones", "loaded_trips"],
        description="Replace the day's rows of daily_zone_stats in the warehouse database",
    )  # fmt: skip
    check = Python(
        "quality_check", CHECK,
        description="Fail loudly unless raw, Parquet, aggregates and PostgreSQL agree with the generator's manifest",
    )  # fmt: skip
    generate >> clean >> load >> check

if __name__ == "__main__":
    wf.apply()
    run = wf.start(wait=True)
    print(run, [(t.name, t.state) for t in run.tasks])
