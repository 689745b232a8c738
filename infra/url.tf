# The coordinator's HTTPS endpoint: POST /query with {"sql": ..., "format": ...} and
# GET /health. AWS_IAM by default: callers sign with SigV4 (service "lambda").

resource "aws_lambda_function_url" "coordinator" {
  function_name      = aws_lambda_function.coordinator.function_name
  authorization_type = var.function_url_auth_type
  invoke_mode        = "BUFFERED"

  # What the web page needs to call it from another origin, signed or not.
  cors {
    allow_origins = var.cors_allow_origins
    allow_methods = ["GET", "POST"]
    allow_headers = [
      "authorization",
      "content-type",
      "x-amz-content-sha256",
      "x-amz-date",
      "x-amz-security-token",
    ]
    # The coordinator's account of a query (workers, GB-seconds, cost) for the profile view.
    expose_headers = ["x-quiver-metrics"]
    max_age        = var.cors_max_age_seconds
  }
}

# NONE only: a public URL needs both grants in the function's resource policy. The second
# applies to calls through the URL only, so the Invoke API stays closed to the public.
resource "aws_lambda_permission" "public_url" {
  count = var.function_url_auth_type == "NONE" ? 1 : 0

  statement_id           = "QuiverPublicUrl"
  action                 = "lambda:InvokeFunctionUrl"
  function_name          = aws_lambda_function.coordinator.function_name
  principal              = "*"
  function_url_auth_type = "NONE"
}

resource "aws_lambda_permission" "public_url_invoke" {
  count = var.function_url_auth_type == "NONE" ? 1 : 0

  statement_id             = "QuiverPublicUrlInvoke"
  action                   = "lambda:InvokeFunction"
  function_name            = aws_lambda_function.coordinator.function_name
  principal                = "*"
  invoked_via_function_url = true
}

# For the client_policy_json output: what a caller's own identity policy needs.
data "aws_iam_policy_document" "client" {
  statement {
    sid       = "QueryThroughUrl"
    actions   = ["lambda:InvokeFunctionUrl"]
    resources = [aws_lambda_function.coordinator.arn]

    condition {
      test     = "StringEquals"
      variable = "lambda:FunctionUrlAuthType"
      values   = ["AWS_IAM"]
    }
  }

  # Needed by the URL too, and by aws lambda invoke.
  statement {
    sid       = "InvokeCoordinator"
    actions   = ["lambda:InvokeFunction"]
    resources = [aws_lambda_function.coordinator.arn]
  }
}
