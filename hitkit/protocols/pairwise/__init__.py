"""Pairwise A/B (ChatEval, ACUTE-Eval style): a prompt or conversation and two replies, pick the better."""
