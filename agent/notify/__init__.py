"""Telling people: the message (``message.py``, pure), the notifiers that carry it (``slack.py``
with slack-sdk, ``log.py`` without a token; both satisfy ``base.Notifier``) and the outbox that
delivers what the store queued, in order and once (``outbox.py``).

Nothing is imported here, so building a message never loads slack-sdk.
"""
