# Source annotations (nmtrepro.data.annotations): one rule file per annotation's stage under annotations/,
# making results/<scale>/<stage>/<dataset>/<part>.<name> and its stats in line-range shards, gathered.
for _rules in ANNOTATION_RULES:

    include: _rules
