"""Static checks of the Terraform module in infra/ (no AWS, no provider download).

The IAM policies are rendered, not pattern-matched: python-hcl2 reads the
aws_iam_policy_document blocks (static and dynamic statements, source documents), and
`terraform console` evaluates their expressions against the module's own variables and
locals for sample inputs, with resource attributes (ARNs known only after apply) standing
in as "<aws_x.y.arn>". The tests then compare each role's effective statements with the
least-privilege set the module promises (infra/iam.tf), so any extra action, wider
resource or new attachment fails them.

Needs python-hcl2 8.x and a terraform binary (scripts/setup-infra.sh installs both). They
skip without them unless QUIVER_INFRA_STRICT=1 (scripts/check-infra.sh sets it). Uses none
of conftest.py's fixtures.
"""
import json
import os
import re
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
INFRA = REPO / "infra"
STRICT = os.environ.get("QUIVER_INFRA_STRICT") == "1"


def _missing(what):
    if STRICT:
        pytest.fail(f"{what} (run scripts/setup-infra.sh)", pytrace=False)
    pytest.skip(f"{what}: run scripts/setup-infra.sh", allow_module_level=True)


try:
    import hcl2
except ImportError:
    _missing("python-hcl2 is not installed")

# python-hcl2 8 keeps HCL's own text: "\"a\"" for a string, "${x}" for an expression. The
# renderer (terraform_hcl.py) relies on that, so refuse any other shape rather than misread it.
if hcl2.loads('x = "a"\ny = var.b\n') != {"x": '"a"', "y": "${var.b}"}:
    _missing("python-hcl2 8.x is required (pip install python-hcl2==8.1.4)")

# Its asserts (a missing resource, a policy that includes itself) report as the tests' own do.
pytest.register_assert_rewrite("terraform_hcl")
from terraform_hcl import (TERRAFORM, Module, blocks, document_hcl, evaluate,  # noqa: E402
                           to_hcl, to_python, unquote)

needs_terraform = pytest.mark.skipif(TERRAFORM is None and not STRICT,
                                     reason="terraform not found: run scripts/setup-infra.sh")


# Rendering each role's policies (terraform_hcl.py renders and evaluates)

def _normalize(statements):
    """Rendered statements as a set of (actions, resources, conditions) for comparison;
    anything beyond Allow + actions + resources + conditions is refused here."""
    result = set()
    for s in statements:
        assert s["effect"] in (None, "Allow"), f"unexpected effect: {s}"
        assert not s["not_actions"] and not s["not_resources"], f"NotAction/NotResource: {s}"
        assert not s["principals"], f"principals in an identity policy: {s}"
        conditions = frozenset((c["test"], c["variable"], tuple(sorted(c["values"])))
                               for c in s["conditions"])
        result.add((tuple(sorted(s["actions"])), tuple(sorted(s["resources"])), conditions))
    return result


def role_policies(module, variables):
    """{role: set of statements} from every aws_iam_role_policy of the module, as they
    render for these variables (documents whose count is 0 are left out)."""
    assert not module.of_type("aws_iam_role_policy_attachment"), "managed policies attached"
    assert not module.of_type("aws_iam_policy_attachment"), "managed policies attached"
    assert not module.of_type("aws_iam_policy"), "managed policies defined"
    for name, role in module.of_type("aws_iam_role").items():
        assert "managed_policy_arns" not in role and "inline_policy" not in role, name
    attached = []
    for name, body in module.resources.items():
        if name[0] != "aws_iam_role_policy":
            continue
        plain = to_python(body)
        role = re.fullmatch(r"\$\{aws_iam_role\.(\w+)\.(id|name)\}", plain["role"])
        doc = re.fullmatch(r"\$\{data\.aws_iam_policy_document\.(\w+)(\[0\])?\.json\}",
                           plain["policy"])
        assert role and doc, f"{name[1]}: role and policy must reference this module's role " \
                             f"and policy document, got {plain['role']}, {plain['policy']}"
        count = to_hcl(body["count"]) if "count" in body else "1"
        attached.append((role.group(1), doc.group(1), count))
    expression = "[" + ", ".join(
        f"{{role = \"{role}\", count = {count}, statements = {document_hcl(module, doc)}}}"
        for role, doc, count in attached) + "]"
    roles = {}
    for entry in evaluate(module, expression, variables):
        if entry["count"]:
            roles.setdefault(entry["role"], set()).update(_normalize(entry["statements"]))
    return roles


# The least-privilege set

ZIPS = {"worker_zip": "w.zip", "coordinator_zip": "c.zip"}

# Two prefixes in one bucket, a whole bucket, a write location, an existing result prefix.
EXISTING_RESULTS = dict(
    ZIPS,
    data_locations=["s3://data-a/tpch/", "s3://data-a/logs/2024", "s3://data-b"],
    write_locations=["s3://out-bucket/reports/"],
    result_location="s3://res-bucket/quiver/spill/",
)

# A results bucket made by the module, no write location, one scheduled job.
CREATED_RESULTS = dict(
    ZIPS,
    data_locations=["s3://data-a/tpch/"],
    create_results_bucket=True,
    scheduled_jobs=[{"name": "nightly", "schedule": "rate(1 day)", "sql": "SELECT 1"}],
)

GET, PUT, DELETE, LIST = "s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"
LOGS = ("logs:CreateLogStream", "logs:PutLogEvents")
NO_CONDITION = frozenset()


def _allow(actions, resources, conditions=NO_CONDITION):
    return (tuple(sorted(actions)), tuple(sorted(resources)), conditions)


def _prefixes(*values):
    return frozenset({("StringLike", "s3:prefix", tuple(sorted(values)))})


def expected(variables):
    """The statements each role should have for these variables, written out by hand."""
    if variables.get("result_location"):
        results = "arn:aws:s3:::res-bucket/quiver/spill/*"
    else:
        results = "arn:aws:s3:::<aws_s3_bucket.results[0].id>/spill/*"
    if variables is EXISTING_RESULTS:
        s3 = {
            _allow([GET], ["arn:aws:s3:::data-a/tpch/*", "arn:aws:s3:::data-a/logs/2024*",
                           "arn:aws:s3:::data-b/*"]),
            _allow([LIST], ["arn:aws:s3:::data-a"], _prefixes("tpch/*", "logs/2024*")),
            _allow([LIST], ["arn:aws:s3:::data-b"]),
            _allow([GET, PUT, DELETE], [results]),
            _allow([PUT, DELETE], ["arn:aws:s3:::out-bucket/reports/*"]),
        }
    else:
        s3 = {
            _allow([GET], ["arn:aws:s3:::data-a/tpch/*"]),
            _allow([LIST], ["arn:aws:s3:::data-a"], _prefixes("tpch/*")),
            _allow([GET, PUT, DELETE], [results]),
        }
    worker = s3 | {_allow(LOGS, ["<aws_cloudwatch_log_group.worker.arn>:*"])}
    coordinator = s3 | {
        _allow(LOGS, ["<aws_cloudwatch_log_group.coordinator.arn>:*"]),
        _allow(["lambda:InvokeFunction"], ["<aws_lambda_function.worker.arn>"]),
        _allow(["lambda:InvokeFunction"], ["<aws_lambda_function.coordinator.arn>"]),
    }
    if variables.get("scheduled_jobs"):
        coordinator.add(_allow(["sqs:SendMessage"], ["<aws_sqs_queue.jobs_dead_letters[0].arn>"]))
    return {"worker": worker, "coordinator": coordinator}


@pytest.fixture(scope="module")
def module():
    return Module(INFRA)


def _diff(actual, wanted):
    extra = "\n  ".join(map(str, sorted(actual - wanted, key=str)))
    missing = "\n  ".join(map(str, sorted(wanted - actual, key=str)))
    return f"granted beyond the least-privilege set:\n  {extra}\nmissing:\n  {missing}"


@needs_terraform
@pytest.mark.parametrize("variables", [EXISTING_RESULTS, CREATED_RESULTS],
                         ids=["existing-result-prefix", "created-results-bucket"])
def test_roles_grant_exactly_the_least_privilege_set(module, variables):
    roles = role_policies(module, variables)
    wanted = expected(variables)
    assert set(roles) == set(wanted), f"roles with policies: {sorted(roles)}"
    for role in wanted:
        assert roles[role] == wanted[role], f"{role}: {_diff(roles[role], wanted[role])}"


# Scans that need no evaluation, over the module and its example

def _all_documents():
    for directory in [INFRA, *sorted((INFRA / "examples").glob("*/"))]:
        for name, body in Module(directory).policy_documents().items():
            yield f"{directory.relative_to(REPO)}:{name}", body


def wildcard_grants(documents):
    """Every action with a * and every resource that is "*", in static and dynamic statements."""
    found = []
    for where, body in documents:
        static, dynamic = blocks(body, "statement")
        for stmt in static + [content for _, _, content in dynamic]:
            for field in ("actions", "not_actions"):
                value = stmt.get(field, [])
                if not isinstance(value, list):
                    found.append(f"{where}: {field} must be a literal list, got {value}")
                    continue
                found += [f"{where}: action {a}" for a in value if "*" in a]
            for field in ("resources", "not_resources"):
                value = stmt.get(field, [])
                value = value if isinstance(value, list) else [value]
                found += [f"{where}: resource {r}" for r in value if unquote(r).strip() == "*"]
    return found


def test_no_wildcard_action_or_resource_anywhere():
    assert wildcard_grants(_all_documents()) == []


def test_every_policy_is_a_policy_document():
    """Inline JSON (jsonencode, heredocs) would escape the checks above."""
    for directory in [INFRA, *sorted((INFRA / "examples").glob("*/"))]:
        module = Module(directory)
        for (rtype, name), body in module.resources.items():
            for field in ("policy", "assume_role_policy"):
                if field in body:
                    assert re.fullmatch(r"\$\{data\.aws_iam_policy_document\.\w+(\[0\])?\.json\}",
                                        body[field]), f"{rtype}.{name}.{field}: {body[field]}"


# Mutations: the checks above must catch a widened policy

def _mutated(module, scratch, old, new, file="iam.tf"):
    """A copy of the module in scratch with one edit."""
    scratch.mkdir(exist_ok=True)
    for path in module.dir.glob("*.tf"):
        shutil.copy(path, scratch / path.name)
    text = (scratch / file).read_text()
    assert old in text, f"mutation target not found: {old}"
    (scratch / file).write_text(text.replace(old, new, 1))
    return Module(scratch)


@needs_terraform
@pytest.mark.parametrize("old,new", [
    ('actions   = ["s3:GetObject"]', 'actions   = ["s3:GetObject", "s3:GetObjectAcl"]'),
    ('resources = [aws_lambda_function.worker.arn]', 'resources = ["${aws_lambda_function.worker.arn}:*"]'),
    ('for_each = length(statement.value) > 0 ? [statement.value] : []', 'for_each = []'),
], ids=["extra-action", "wider-resource", "dropped-prefix-condition"])
def test_a_widened_policy_fails(module, tmp_path, old, new):
    roles = role_policies(_mutated(module, tmp_path, old, new), EXISTING_RESULTS)
    assert roles != expected(EXISTING_RESULTS)


def test_wildcards_are_caught(module, tmp_path):
    widened = _mutated(module, tmp_path / "a", '"s3:GetObject"]', '"s3:Get*"]')
    assert wildcard_grants(widened.policy_documents().items())
    everything = _mutated(module, tmp_path / "b", "resources = local.data_object_arns",
                          'resources = ["*"]')
    assert wildcard_grants(everything.policy_documents().items())


def test_a_managed_policy_attachment_fails(module, tmp_path):
    attached = _mutated(module, tmp_path, "# Tree invocation", 'resource "aws_iam_role_policy_attachment" "x" {\n'
                        '  role       = aws_iam_role.worker.name\n'
                        '  policy_arn = "arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"\n}\n\n'
                        "# Tree invocation")
    with pytest.raises(AssertionError, match="managed policies"):
        role_policies(attached, EXISTING_RESULTS)


# Variables: what the module accepts

@needs_terraform
@pytest.mark.parametrize("overrides", [
    {"data_locations": ["s3://data-a/tpch/*"]},
    {"data_locations": []},
    {"write_locations": ["s3://out-bucket"]},
    {"result_location": "s3://res-bucket/"},
    {"function_url_auth_type": "BASIC"},
    {"cors_allow_origins": ["https://example.com/path"]},
    {"log_retention_days": 0},
    {"scheduled_jobs": [{"name": "bad name", "schedule": "rate(1 day)", "sql": "SELECT 1"}]},
], ids=lambda o: next(iter(o)))
def test_invalid_variables_are_refused(module, overrides):
    with pytest.raises(ValueError, match="Invalid value for variable"):
        evaluate(module, "var.name", dict(EXISTING_RESULTS, **overrides))


@needs_terraform
def test_s3_uris_become_arns(module):
    got = evaluate(module, "[local.data_object_arns, local.data_buckets, local.write_object_arns, "
                           "local.result_object_arn, local.result_uri]", EXISTING_RESULTS)
    assert got == [
        ["arn:aws:s3:::data-a/tpch/*", "arn:aws:s3:::data-a/logs/2024*", "arn:aws:s3:::data-b/*"],
        {"data-a": ["tpch/*", "logs/2024*"], "data-b": []},
        ["arn:aws:s3:::out-bucket/reports/*"],
        "arn:aws:s3:::res-bucket/quiver/spill/*",
        "s3://res-bucket/quiver/spill/",
    ]


# The rest of the contract with the functions and the web page

def test_functions(module):
    for name in ("worker", "coordinator"):
        fn = module.resource("aws_lambda_function", name)
        assert fn["runtime"] == "provided.al2023"
        assert fn["architectures"] == ["arm64"]
        assert fn["handler"] == "bootstrap"
        assert fn["filename"] == f"${{var.{name}_zip}}"
        assert fn["source_code_hash"] == f"${{filebase64sha256(var.{name}_zip)}}"
        assert fn["role"] == f"${{aws_iam_role.{name}.arn}}"
        assert f"${{aws_cloudwatch_log_group.{name}}}" in fn["depends_on"], \
            "the log group must exist before Lambda creates one without retention"
        for setting in ("memory_size", "timeout", "reserved_concurrent_executions"):
            assert fn[setting].startswith("${var."), f"{name}.{setting} should be a variable"


@needs_terraform
def test_environment(module):
    """What the functions read (lambda/src/options.rs), rendered for sample variables."""
    expression = "[" + ", ".join(
        to_hcl(module.resources[("aws_lambda_function", name)]["environment"][0]["variables"])
        for name in ("worker", "coordinator")) + "]"
    worker, coordinator = evaluate(module, expression, EXISTING_RESULTS)
    # Half of the default 2048 MB of /tmp keeps remote bytes (the disk cache).
    assert worker == {"QUIVER_RESULT_PREFIX": "s3://res-bucket/quiver/spill/", "RUST_LOG": "info",
                      "QUIVER_DISK_CACHE_BYTES": str(1024 << 20)}
    assert coordinator == dict(worker,
                               QUIVER_WORKER_FUNCTION="<aws_lambda_function.worker.function_name>",
                               QUIVER_MAX_WORKERS="64",
                               QUIVER_BYTES_PER_WORKER="268435456",
                               QUIVER_TREE_THRESHOLD="64",
                               QUIVER_WORKER_RETRIES="2",
                               QUIVER_WORKER_MEMORY_MB="2048")


def test_function_url_is_iam_unless_chosen(module):
    url = module.resource("aws_lambda_function_url", "coordinator")
    assert url["authorization_type"] == "${var.function_url_auth_type}"
    auth = module.variable("function_url_auth_type")
    assert auth["default"] == "AWS_IAM"
    cors = url["cors"][0]
    assert sorted(cors["allow_methods"]) == ["GET", "POST"]
    assert sorted(cors["allow_headers"]) == ["authorization", "content-type", "x-amz-content-sha256",
                                             "x-amz-date", "x-amz-security-token"]
    assert cors["allow_origins"] == "${var.cors_allow_origins}"
    assert cors["expose_headers"] == ["x-quiver-metrics"]
    assert "*" not in module.variable("cors_allow_origins")["default"]
    # The page GETs a big answer from the results bucket: those origins, GET only.
    rule = module.resource("aws_s3_bucket_cors_configuration", "results")["cors_rule"][0]
    assert rule["allowed_origins"] == "${var.cors_allow_origins}"
    assert rule["allowed_methods"] == ["GET"]
    # Public grants exist only for NONE.
    for name in ("public_url", "public_url_invoke"):
        permission = module.resource("aws_lambda_permission", name)
        assert permission["count"] == '${var.function_url_auth_type == "NONE" ? 1 : 0}'
    assert module.resource("aws_lambda_permission", "public_url_invoke")[
        "invoked_via_function_url"] in (True, "${true}")


def test_log_groups_have_retention(module):
    groups = module.of_type("aws_cloudwatch_log_group")
    assert set(groups) == {"worker", "coordinator"}
    for name, group in groups.items():
        assert group["name"] == f"/aws/lambda/${{local.{name}_name}}"
        assert group["retention_in_days"] == "${var.log_retention_days}"
    assert module.variable("log_retention_days")["default"] > 0


def test_results_bucket(module):
    block = module.resource("aws_s3_bucket_public_access_block", "results")
    for key in ("block_public_acls", "block_public_policy", "ignore_public_acls",
                "restrict_public_buckets"):
        assert block[key] in (True, "${true}"), key
    lifecycle = module.resource("aws_s3_bucket_lifecycle_configuration", "results")
    spill = [r for r in lifecycle["rule"] if "expiration" in r]
    assert spill and spill[0]["filter"][0]["prefix"] == "${var.results_prefix}"
    assert spill[0]["expiration"][0]["days"] == "${var.results_expiration_days}"
    sse = module.resource("aws_s3_bucket_server_side_encryption_configuration", "results")
    assert sse["rule"][0]["apply_server_side_encryption_by_default"][0]["sse_algorithm"] == "AES256"


@needs_terraform
def test_scheduled_jobs(module):
    target = module.resource("aws_cloudwatch_event_target", "job")
    assert target["arn"] == "${aws_lambda_function.coordinator.arn}"
    # The coordinator's direct-invoke payload, plus the job's name.
    payload = to_hcl(module.resources[("aws_cloudwatch_event_target", "job")]["input"])
    payload = re.sub(r"\beach\.key\b", "var.scheduled_jobs[0].name",
                     re.sub(r"\beach\.value\b", "var.scheduled_jobs[0]", payload))
    assert json.loads(evaluate(module, payload, CREATED_RESULTS)) == {
        "sql": "SELECT 1", "format": "json", "job": "nightly"}
    assert target["dead_letter_config"][0]["arn"] == "${aws_sqs_queue.jobs_dead_letters[0].arn}"
    assert "retry_policy" in target
    queue = module.resource("aws_sqs_queue", "jobs_dead_letters")
    assert queue["sqs_managed_sse_enabled"] in (True, "${true}")
    invoke_config = module.resource("aws_lambda_function_event_invoke_config", "coordinator")
    on_failure = invoke_config["destination_config"][0]["on_failure"][0]
    assert on_failure["destination"] == "${aws_sqs_queue.jobs_dead_letters[0].arn}"
    permission = module.resource("aws_lambda_permission", "job")
    assert permission["principal"] == "events.amazonaws.com"
    assert permission["source_arn"] == "${aws_cloudwatch_event_rule.job[each.key].arn}"
    # Only this module's rules may send to the queue.
    policy = to_python(module.policy_documents()["jobs_dead_letters"])["statement"][0]
    assert policy["actions"] == ["sqs:SendMessage"]
    assert policy["principals"][0]["identifiers"] == ["events.amazonaws.com"]
    assert policy["condition"][0]["variable"] == "aws:SourceArn"


def test_example_uses_the_build_output():
    example = Module(INFRA / "examples" / "basic")
    quiver = to_python(example.modules["quiver"])
    assert quiver["source"] == "../.."
    for name in ("worker", "coordinator"):
        assert quiver[f"{name}_zip"].endswith(f"/dist/lambda/{name}/bootstrap.zip")
    assert "COPY" in example.raw["main.tf"] and "scheduled_jobs" in quiver


def test_terraform_1_5_syntax():
    """Nothing newer than Terraform 1.5, which CI installs."""
    newer = [r"^\s*removed\s*\{", r"^\s*ephemeral\s", r"\bprovider::", r"\btemplatestring\(",
             r"\bephemeralasnull\("]
    for path in INFRA.rglob("*.tf"):
        for pattern in newer:
            assert not re.search(pattern, path.read_text(), flags=re.M), f"{path}: {pattern}"
