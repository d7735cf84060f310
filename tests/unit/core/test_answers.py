"""06's held-out metric: GSM8K's final answer after ####, exact; the learnable language's letters, exact."""

from raytrain_helpers.core import answers

#: The form of a GSM8K answer (openai/gsm8k, main config): a worked solution with <<calculator>> notes, then ####.
SOLUTION = "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips.\n#### 72"


def test_the_final_answer_after_the_marks_is_compared_as_a_number():
    assert answers.final_answer(SOLUTION) == "72"
    assert answers.matches("She sold 72 in all.\n#### 72", SOLUTION)
    assert answers.matches("#### 72.0\nQuestion: next", SOLUTION)  # the line after is not the answer
    assert answers.matches("#### $1,000.", "#### 1000") and answers.matches("#### 7.50", "#### 7.5")
    assert not answers.matches("#### 73", SOLUTION)
    assert not answers.matches("Natalia sold 72 clips.", SOLUTION), "no #### line: wrong, however close"


def test_without_marks_the_continuation_must_start_with_the_expected_text():
    assert answers.matches("efgh", "efgh") and answers.matches("efghij", "efgh")
    assert not answers.matches("efgi", "efgh") and not answers.matches("anything", "")
