"""Stages (DESIGN §2): the steps a job runs between its source and its sink."""
