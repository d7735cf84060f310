"""core.tables: plain-text tables that fit the page."""


def test_a_table_wider_than_the_page_wraps_its_widest_columns_and_cuts_nothing_off():
    from raytrain_helpers.core.tables import MAX_WIDTH, format_table

    long = "none (qwen2: liger-kernel's apply_liger_kernel_to_qwen2 exists; kernels: none, a CPU worker)"
    text = format_table(
        [["fused kernels", long], ["the source article's figure " * 2, "11.5 GiB"]], ["what", "value"], fit=True
    )
    assert max(len(line) for line in text.splitlines()) <= MAX_WIDTH
    words = " ".join(text.replace("|", " ").split())
    assert "..." not in text and all(w in words for w in long.split())
    wide = [["the source article's figure " * 2, long]]
    assert max(len(line) for line in format_table(wide, ["x", "y"], max_width=200).splitlines()) > MAX_WIDTH  # opt-in
