"""Live chat with Direct Assessment (Ji et al., ACL 2022): chat with each bot, rate on 0–100 sliders."""
