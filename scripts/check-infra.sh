#!/usr/bin/env bash
# Checks the Terraform deployment in infra/ without AWS or the AWS provider (which cannot
# be downloaded here, so `terraform validate` is not among them): formatting, checkov's
# static security scan (a check that does not apply is skipped in the code, with the
# reason), and tests/test_infra.py, which renders the IAM policies and compares them
# with the least-privilege set.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup-infra.sh

# A CLI config file that is named but missing only makes Terraform warn.
if [ -n "${TF_CLI_CONFIG_FILE:-}" ] && [ ! -e "$TF_CLI_CONFIG_FILE" ]; then
  unset TF_CLI_CONFIG_FILE
fi

echo "==> terraform fmt"
"$TERRAFORM" fmt -check -recursive -diff infra

echo "==> checkov"
"$CHECKOV" -d infra --framework terraform --quiet --compact --skip-download

# --noconftest: tests/conftest.py sets up the query tests (DuckDB, the built binary);
# these tests use none of it. QUIVER_INFRA_STRICT turns a missing tool into a failure.
echo "==> tests/test_infra.py"
QUIVER_INFRA_STRICT=1 python3 -m pytest -q --noconftest -p no:cacheprovider tests/test_infra.py

echo "==> infra checks passed"
