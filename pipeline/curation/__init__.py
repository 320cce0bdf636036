"""Curation: what the curation stages find in a conversation's text, apart from the stage
contract. PII and secrets (pii.py), a thread's languages (language.py), quality heuristics
for chat (quality.py), n-gram contamination with evaluation sets (contamination.py). Each
works on text and messages only (no files, no engine), so the stages in
pipeline/stages/curate/ run it on either engine with the same results."""
