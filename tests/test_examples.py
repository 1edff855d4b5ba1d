"""Paper D's Fig. 6 examples: the reference n-grams in bold, the rule that picks the sentences, the command."""
from nmtrepro import cli
from nmtrepro.analyses.examples import highlight, pick


def test_a_reference_bigram_occurring_once_is_matched_once():
    assert highlight("a b a b".split(), "a b c".split()) == (("a b", True), ("a", False), ("b", False))


def test_highlight_takes_the_longest_match_first_and_uses_up_its_words():
    # The 4-gram uses the reference's only "the": the second "the" stays plain, "mat" is found alone.
    spans = highlight("the cat sat on the mat".split(), "the cat sat on a mat".split())
    assert spans == (("the cat sat on", True), ("the", False), ("mat", True))


def test_a_word_the_reference_holds_twice_is_matched_twice():
    assert highlight("dog dog dog".split(), "dog cat dog".split()) == (("dog", True), ("dog", True), ("dog", False))


def test_a_span_is_found_only_while_the_reference_has_all_its_words_left():
    # "a a" is a reference bigram, but the first "a" used one of the reference's two: one "a" is left.
    assert highlight("a x a a".split(), "a a".split()) == (("a", True), ("x", False), ("a", True), ("a", False))


def test_pick_takes_the_largest_gains_among_short_sources_ties_to_the_earlier_line():
    lengths, gains = [3, 3, 3, 50, 3], [1.0, 5.0, 5.0, 9.0, -2.0]
    assert pick(lengths, gains, count=2, max_len=40) == [1, 2]        # line 3 is too long, 1 before 2
    assert pick(lengths, gains, count=9, max_len=50) == [3, 1, 2, 0, 4]
    assert pick(lengths, gains, count=3, max_len=2) == []


def test_examples_command_writes_the_picked_sentence_bold_in_three_formats(tmp_path):
    src = ["ein kl@@ einer Test", "der Hund_x läuft", "x " * 50]
    ref = ["a small test", "the dog_x runs fast", "y " * 50]
    hyp = ["a test", "the dog_x runs fast", "y " * 50]     # line 3 gains most but is too long
    base = ["a test", "a cat_y runs", "z " * 50]
    files = {}
    for name, lines in {"src": src, "ref": ref, "hyp": hyp, "base": base}.items():
        files[name] = tmp_path / name
        files[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = {ext: tmp_path / f"fig6.{ext}" for ext in ("md", "html", "tex")}
    assert cli.main(["examples", "--src-bpe", str(files["src"]), "--ref-tok", str(files["ref"]),
                     "--system", f"Ours={files['hyp']}={files['base']}", "--count", "1", "--title", "Fig. 6",
                     "--note", "A note.", *[a for ext, path in out.items() for a in (f"--out-{ext}", str(path))]]) == 0
    md, html, tex = (out[ext].read_text(encoding="utf-8") for ext in ("md", "html", "tex"))
    assert "| Ours     | 2      | Source" in md and md.count("Ours") == 1 and "der Hund\\_x läuft" in md
    assert "**the dog\\_x runs fast**" in md and "a cat\\_y **runs**" in md
    assert "<b>the dog_x runs fast</b>" in html and "a cat_y <b>runs</b>" in html
    assert r"\textbf{the dog\_x runs fast}" in tex and r"Hund\_x" in tex
    assert "4/4, 3/3, 2/2, 1/1" in md and "100.00" in md
    assert "A note. Examples picked by rule" in md and "at most 40 tokens" in md
    assert "x x x" not in md and "ein kleiner Test" not in md
