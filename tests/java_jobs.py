"""Java jobs the MR and SPARK (JAVA) tests compile with ``javac`` against the Hadoop and Spark classes of the
pyspark wheel: a MapReduce word count (with a slow mode, for kill tests) and a Spark application that sums
and prints its application id (or keeps its executors busy, for stop tests)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyspark

JARS = Path(pyspark.__file__).parent / "jars"

WORD_COUNT = """
import java.io.IOException;
import java.util.StringTokenizer;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.IntWritable;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.Mapper;
import org.apache.hadoop.mapreduce.Reducer;
import org.apache.hadoop.mapreduce.lib.input.FileInputFormat;
import org.apache.hadoop.mapreduce.lib.output.FileOutputFormat;
import org.apache.hadoop.util.GenericOptionsParser;

public class WordCount {
  public static class TokenizerMapper extends Mapper<Object, Text, Text, IntWritable> {
    private static final IntWritable ONE = new IntWritable(1);
    private final Text word = new Text();
    public void map(Object key, Text value, Context context) throws IOException, InterruptedException {
      long pause = context.getConfiguration().getLong("porpoise.test.sleep.ms", 0);
      if (pause > 0) { Thread.sleep(pause); }
      StringTokenizer itr = new StringTokenizer(value.toString());
      while (itr.hasMoreTokens()) { word.set(itr.nextToken()); context.write(word, ONE); }
    }
  }
  public static class IntSumReducer extends Reducer<Text, IntWritable, Text, IntWritable> {
    public void reduce(Text key, Iterable<IntWritable> values, Context context)
        throws IOException, InterruptedException {
      int sum = 0;
      for (IntWritable v : values) { sum += v.get(); }
      context.write(key, new IntWritable(sum));
    }
  }
  public static void main(String[] args) throws Exception {
    Configuration conf = new Configuration();
    String[] rest = new GenericOptionsParser(conf, args).getRemainingArgs();
    Job job = Job.getInstance(conf, conf.get("mapreduce.job.name", "word count"));
    job.setJarByClass(WordCount.class);
    job.setMapperClass(TokenizerMapper.class);
    job.setCombinerClass(IntSumReducer.class);
    job.setReducerClass(IntSumReducer.class);
    job.setOutputKeyClass(Text.class);
    job.setOutputValueClass(IntWritable.class);
    FileInputFormat.addInputPath(job, new Path(rest[0]));
    FileOutputFormat.setOutputPath(job, new Path(rest[1]));
    System.exit(job.waitForCompletion(true) ? 0 : 1);
  }
}
"""

SPARK_SUM = """
import java.util.Arrays;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;

public class SparkSum {
  public static void main(String[] args) throws Exception {
    SparkSession spark = SparkSession.builder().appName("porpoise-sum").getOrCreate();
    JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    System.out.println("APP=" + sc.sc().applicationId());
    if (args.length > 0 && args[0].equals("long")) {
      System.out.println("UP");
      spark.range(0L, 10000000000000L, 1L, 2).selectExpr("sum(hash(id))").collect();
    } else {
      long n = Long.parseLong(args[0]);
      long total = sc.parallelize(Arrays.asList(1L, 2L, 3L), 2).map(x -> x * n).reduce(Long::sum);
      System.out.println("SUM=" + total);
    }
    spark.stop();
  }
}
"""


def build_jar(directory: Path, name: str, source: str) -> Path:
    """``<directory>/<name>.jar`` compiled from one Java source (class ``name``), readable by every user."""
    src, classes = directory / "src", directory / "classes"
    src.mkdir(parents=True, exist_ok=True)
    classes.mkdir(parents=True, exist_ok=True)
    (src / f"{name}.java").write_text(source)
    subprocess.run(
        ["javac", "-nowarn", "-cp", f"{JARS}/*", "-d", str(classes), str(src / f"{name}.java")],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    jar = directory / f"{name}.jar"
    subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "."], check=True, capture_output=True, timeout=120)
    for path in (directory, jar):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return jar
