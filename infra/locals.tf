# Names and S3 ARNs, derived from variables alone: no resource or data source appears
# here, so tests/test_infra.py evaluates this file with `terraform console` and no
# provider. local.partition comes from main.tf.

locals {
  worker_name      = "${var.name}-worker"
  coordinator_name = "${var.name}-coordinator"

  # s3://BUCKET/PREFIX -> { bucket, prefix }; the prefix is "" for a whole bucket.
  s3_uri = "^s3://([^/]+)/?(.*)$"

  data_locations = [for uri in var.data_locations : {
    bucket = regex(local.s3_uri, uri)[0]
    prefix = regex(local.s3_uri, uri)[1]
  }]

  write_locations = [for uri in var.write_locations : {
    bucket = regex(local.s3_uri, uri)[0]
    prefix = regex(local.s3_uri, uri)[1]
  }]

  # null when the module creates the results bucket (results.tf picks between the two).
  result_location = var.result_location == null ? null : {
    bucket = regex(local.s3_uri, var.result_location)[0]
    prefix = regex(local.s3_uri, var.result_location)[1]
  }

  # s3:GetObject on the keys under each data prefix.
  data_object_arns = distinct([
    for l in local.data_locations : "arn:${local.partition}:s3:::${l.bucket}/${l.prefix}*"
  ])

  # s3:ListBucket, one statement per bucket: bucket => the s3:prefix patterns it may list.
  # An empty list means the whole bucket (no condition): a request that lists from the
  # root sends no prefix, and StringLike fails on a missing key.
  data_list_prefixes = { for l in local.data_locations : l.bucket => l.prefix... }
  data_buckets = {
    for bucket, prefixes in local.data_list_prefixes :
    bucket => contains(prefixes, "") ? [] : distinct([for p in prefixes : "${p}*"])
  }

  # s3:PutObject and s3:DeleteObject for COPY ... TO.
  write_object_arns = distinct([
    for l in local.write_locations : "arn:${local.partition}:s3:::${l.bucket}/${l.prefix}*"
  ])
}
