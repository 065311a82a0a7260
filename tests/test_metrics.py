"""/metrics for operators (issue 13, item 6): the queue read from the database, gradings
counted as they are stored, slots in and out of service."""

import re

from test_server_api import NoDispatch, add_students, running, submit, wait_done


def _value(text: str, name: str, labels: str = "") -> float:
    match = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", text, re.M)
    assert match, f"{name}{labels} not in /metrics"
    return float(match.group(1))


def test_metrics_show_the_queue_and_its_oldest_submission(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}", dispatcher=NoDispatch()) as client:
        tokens = add_students(client, "ada", "bob")
        for name in ("ada", "bob"):
            assert submit(client, tokens[name]).status_code == 202
        r = client.get("/metrics")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
        assert _value(r.text, "autograder_submissions", '{status="queued"}') == 2
        assert _value(r.text, "autograder_submissions", '{status="graded"}') == 0
        assert _value(r.text, "autograder_oldest_queued_seconds") >= 0


def test_with_metrics_token_set_only_its_holder_reads_metrics(tmp_path):
    token = "metrics-reader-token-0123"
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}", dispatcher=NoDispatch(),
                 metrics_token=token) as client:
        for headers in ({}, {"Authorization": "Bearer " + "x" * 24},
                        {"Authorization": f"Basic {token}"}):
            r = client.get("/metrics", headers=headers)
            assert r.status_code == 401 and "autograder_" not in r.text
            assert r.headers["www-authenticate"].startswith("Bearer")
        r = client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200 and "autograder_submissions" in r.text


def test_metrics_count_stored_gradings_and_the_local_slots(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}") as client:  # the fake grader
        before = client.get("/metrics").text
        count = '_count{device="cpu"}'
        start = _value(before, "autograder_grading_seconds", count) \
            if "autograder_grading_seconds_count{" in before else 0
        token = add_students(client, "ada")["ada"]
        sid = submit(client, token).json()["id"]
        wait_done(client, token, sid)
        text = client.get("/metrics").text
        assert _value(text, "autograder_grading_seconds", count) == start + 1
        assert _value(text, "autograder_verdicts_total", '{verdict="passed"}') >= 1
        assert _value(text, "autograder_submissions", '{status="graded"}') == 1
        assert _value(text, "autograder_graders", '{state="in_service"}') == 1
        assert _value(text, "autograder_graders", '{state="out_of_service"}') == 0
