"""The data settings: where the rows are, their form, your column names, the prompt template; each refused with
the setting's name and the fix."""

import pytest

from raytrain_helpers.core import loading
from raytrain_helpers.core.validation import ConfigError


def load(**params):
    return loading.load(None, environ={}, check_installed_ray=False, **params)


def test_a_hub_dataset_path_is_accepted_and_a_malformed_one_names_the_form():
    s = load(data="hf://datasets/openai/gsm8k/main/train-00000-of-00001.parquet")
    assert s.train.data.startswith("hf://datasets/openai/gsm8k/")
    with pytest.raises(ConfigError, match=r"train.data .*not a Hub dataset path.*Fix: hf://datasets/ORG/NAME/PATH"):
        load(data="hf://openai/gsm8k")


def test_the_form_the_columns_and_the_template(tmp_path):
    (tmp_path / "qa.csv").write_text("question,answer\n1,2\n")
    s = load(data=str(tmp_path / "qa.csv"), data_format="prompt_completion", data_columns={"prompt": "question"})
    assert (s.train.data_format, s.train.data_columns) == ("prompt_completion", {"prompt": "question"})
    with pytest.raises(ConfigError, match=r"train.data_columns .*names \['question'\], which no form reads.*Fix"):
        load(data_columns={"question": "prompt"})
    with pytest.raises(ConfigError, match=r"train.prompt_template .*has no `\{prompt\}`.*Fix"):
        load(prompt_template="Question: ")
    with pytest.raises(ConfigError, match=r"train.data .*neither .*Fix"):
        load(data=str(tmp_path / "missing.jsonl"))
