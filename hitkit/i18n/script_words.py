"""The sentences the worker pages' scripts (``hit_templates/static/*.js``) show, by the key a script asks for.

The page carries them in its language as JSON (server/i18n.py); ``words.js`` fills in ``%(name)s``.
"""

from __future__ import annotations

from hitkit.i18n import N_, Message

SCRIPT_WORDS: dict[str, Message] = {
    # Saving answers (every protocol).
    "saving": N_("saving…"),
    "saved": N_("saved"),
    "not_saved": N_("not saved — please try again"),
    "not_saved_later": N_("not saved — it will be sent with Submit"),
    "not_saved_offline": N_("not saved (connection problem) — your answer will be sent with Submit"),
    "connection": N_("connection problem — please try again"),
    "connection_broke": N_("the connection broke — your message is saved, please try again"),
    "no_task": N_("could not load the task — please reload the page"),
    "something_wrong": N_("something went wrong"),
    "progress": N_("%(label)s of %(total)s"),
    "move_sliders": N_("Please move every slider (you can move it back to where it was)."),
    "answer_all": N_("Please answer every question first."),
    # Spot The Bot.
    "speaker_a": N_("Speaker A"),
    "speaker_b": N_("Speaker B"),
    # Live chat.
    "say_feeling": N_("Please say how you feel about the topic."),
    "bot_typing": N_("The chatbot is typing…"),
    "bot_slow": N_(
        "The chatbot is taking longer than usual. Your message is saved — please wait a moment and press Try again."
    ),
    "too_many_send": N_(
        "Too many replies are being written at once — please wait a moment and send your message again."
    ),
    # Arena.
    "vote_a": N_("A is better"),
    "vote_b": N_("B is better"),
    "vote_tie": N_("Tie"),
    "vote_both_bad": N_("Both are bad"),
    "vote_recorded": N_("Your vote is recorded: %(vote)s."),
    "your_reason": N_("Your reason: “%(reason)s”"),
    "assistants_writing": N_("The assistants are writing…"),
    "too_many_retry": N_("Too many replies are being written at once — please wait a moment and press Try again."),
    "assistant_slow": N_("An assistant is taking longer than usual. Your message is saved — please press Try again."),
}
"""Script key -> the English sentence (its message id)."""
