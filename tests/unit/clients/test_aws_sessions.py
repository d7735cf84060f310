"""Sessions share the parsed API models, never the credentials."""

from __future__ import annotations

from botocore.loaders import JSONFileLoader

from raytrain_helpers.clients import aws


def test_each_api_model_is_parsed_once_and_credentials_are_resolved_per_session(monkeypatch):
    loaded: list[str] = []
    original = JSONFileLoader.load_file

    def counting(self, file_path):
        loaded.append(str(file_path))
        return original(self, file_path)

    monkeypatch.setattr(JSONFileLoader, "load_file", counting)
    aws.shared_loader.cache_clear()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFIRSTSESSION0000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "first")
    first = aws.session("us-west-2")
    aws.client(first, "ec2")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIASECONDSESSION000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "second")
    second = aws.session("eu-west-1")
    aws.client(second, "ec2")
    ec2_models = [p for p in loaded if "/botocore/data/ec2/" in p and p.endswith("/service-2")]
    assert len(ec2_models) == 1, loaded
    assert first.get_credentials().access_key == "AKIAFIRSTSESSION0000"
    assert second.get_credentials().access_key == "AKIASECONDSESSION000"
    assert (first.region_name, second.region_name) == ("us-west-2", "eu-west-1")


def test_a_session_makes_each_client_once(monkeypatch):
    """The same session, service and region give the same client; another region, retry mode or session a new one."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFIRSTSESSION0000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "first")
    monkeypatch.delenv("AWS_RETRY_MODE", raising=False)
    sess = aws.session("us-west-2")
    eks = aws.client(sess, "eks")
    assert aws.client(sess, "eks", "us-west-2") is eks
    assert aws.client(sess, "eks", "eu-west-1") is not eks
    assert aws.client(sess, "iam") is not eks
    monkeypatch.setenv("AWS_RETRY_MODE", "adaptive")
    adaptive = aws.client(sess, "eks")
    assert adaptive is not eks and adaptive.meta.config.retries["mode"] == "adaptive"
    assert aws.client(aws.session("us-west-2"), "eks") is not adaptive
