# A deployment of Quiver: data read from one prefix, reports written to another, spilled
# results in a bucket made for them, and a nightly COPY job. Build first
# (scripts/build-lambda.sh at the repository root), then terraform init && terraform apply.

terraform {
  required_version = ">= 1.5"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 6.29"
    }
  }
}

provider "aws" {
  region = var.region

  default_tags {
    tags = { project = "quiver" }
  }
}

module "quiver" {
  source = "../.."

  name = var.name

  # Built by scripts/build-lambda.sh into dist/lambda/ at the repository root.
  worker_zip      = "${path.module}/../../../dist/lambda/worker/bootstrap.zip"
  coordinator_zip = "${path.module}/../../../dist/lambda/coordinator/bootstrap.zip"

  data_locations        = [var.data_location]
  write_locations       = [var.reports_location]
  create_results_bucket = true

  function_url_auth_type = "AWS_IAM"
  cors_allow_origins     = var.web_origins

  # Every night at 02:15 UTC, revenue per ship date, one Parquet folder per return flag.
  scheduled_jobs = [{
    name     = "nightly-revenue"
    schedule = "cron(15 2 * * ? *)"
    sql      = <<-SQL
      COPY (
        SELECT l_returnflag, l_shipdate, sum(l_extendedprice * (1 - l_discount)) AS revenue
        FROM '${var.data_location}lineitem/*.parquet'
        GROUP BY l_returnflag, l_shipdate
      )
      TO '${var.reports_location}revenue/'
      STORED AS PARQUET
      PARTITIONED BY (l_returnflag)
    SQL
  }]
}
