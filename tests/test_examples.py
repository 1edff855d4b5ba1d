"""Paper D's Fig. 6 examples: the reference n-grams in bold, the rule that picks the sentences, the command."""
from nmtrepro import cli
from nmtrepro.analyses.examples import highlight, pick
from nmtrepro.reporting.render import Marked


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


def test_highlight_counts_the_references_that_hold_each_span():
    hyp = "the delegations of the two sides met".split()
    refs = ["the delegations of both sides met".split(), "delegations from the two sides met".split(),
            "the two sides sent delegations".split()]
    # "the delegations of" is only in the first; "the two sides met" in the second; "met" alone in the first.
    assert highlight(hyp, *refs) == (("the delegations of", 1), ("the two sides met", 1))
    assert highlight("the two sides".split(), *refs) == (("the two sides", 2),)
    assert highlight("sides delegations".split(), *refs) == (("sides", 3), ("delegations", 3))
    assert highlight("nothing".split(), *refs) == (("nothing", 0),)


def test_with_one_reference_the_counts_are_todays_bold():
    hyp, ref = "the cat sat on the mat".split(), "the cat sat on a mat".split()
    assert highlight(hyp, ref) == (("the cat sat on", True), ("the", False), ("mat", True))
    assert Marked(highlight(hyp, ref)).html() == "<b>the cat sat on</b> the <b>mat</b>"


def test_a_counted_span_shows_how_many_references_hold_it_in_each_format():
    marked = Marked((("the two", 2), ("x", 0), ("sides", 4)), counted=True)
    assert marked.markdown() == "**the two**² x **sides**⁴"
    assert marked.html() == ('<b style="background-color:#fff59d">the two</b><sup>2</sup> x '
                             '<b style="background-color:#a5d6a7">sides</b><sup>4</sup>')
    assert marked.tex() == r"\textbf{the two}\textsuperscript{2} x \textbf{sides}\textsuperscript{4}"


def test_examples_command_reads_every_reference_and_colours_by_their_count(tmp_path):
    src = ["ein Test", "der Hund läuft"]
    refs = [["a test", "the dog runs fast"], ["one test", "the dog runs"], ["a trial", "a dog is running"]]
    hyp, base = ["a test", "the dog runs"], ["a test", "a dog"]  # line 2 gains most
    files = {}
    for name, lines in {"src": src, "hyp": hyp, "base": base, **{f"ref{k}": r for k, r in enumerate(refs)}}.items():
        files[name] = tmp_path / name
        files[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = {ext: tmp_path / f"fig6.{ext}" for ext in ("md", "html", "tex")}
    assert cli.main(["examples", "--src-bpe", str(files["src"]),
                     *[a for k in range(3) for a in ("--ref-tok", str(files[f"ref{k}"]))],
                     "--system", f"Ours={files['hyp']}={files['base']}", "--count", "1", "--title", "Fig. 6",
                     *[a for ext, path in out.items() for a in (f"--out-{ext}", str(path))]]) == 0
    md, html = (out[ext].read_text(encoding="utf-8") for ext in ("md", "html"))
    assert "| Reference 1 | the dog runs fast" in md and "| Reference 3 | a dog is running" in md
    assert "**the dog runs**²" in md and "**a dog**¹" in md  # system: in two references; baseline: in one
    assert '<b style="background-color:#fff59d">the dog runs</b><sup>2</sup>' in html
    assert "found in any of the 3 references" in md and "Fig. 6: orange 1, yellow 2, blue 3)" in md
    assert "on Moses tokens, against every reference" in md
