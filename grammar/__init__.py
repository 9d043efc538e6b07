"""The Lark grammar of the policy language (``policy.lark``); nothing else lives here."""

__all__: list[str] = []  # data files only
