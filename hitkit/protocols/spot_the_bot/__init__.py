"""Spot The Bot (Deriu et al., EMNLP 2020): label each speaker of a conversation human, bot or unsure."""
