"""The Lark grammar of the policy language (``policy.lark``); nothing else lives here."""
