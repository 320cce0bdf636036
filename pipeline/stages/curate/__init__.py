"""The curation stages (PII, language, quality, decontamination), each a tagger and a decision (DESIGN §2, "taggers record,
mixers decide"): its map side looks at every thread, may rewrite it (PII redaction) and
records what it found in the thread's `meta` and in a column naming the reason the
configured action drops it for; its dataset side drops by that column when the action is
`drop`, so every drop is counted, listed and kept group-whole like any other stage's.

- pii.py: personal data and secrets, redacted, tagged or dropped per role;
- language.py: the thread's languages, kept or dropped by a list;
- quality.py: quality heuristics for chat;
- decontaminate.py: n-gram overlap with evaluation sets;
- plugins.py: filters a curator writes (a callable, or a Stage subclass, named in the
  config)."""
