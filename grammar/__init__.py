"""The Lark grammars: the policy language (``policy.lark``) and JSON (``json.lark``, to locate
the values of a refused file); nothing else lives here."""
