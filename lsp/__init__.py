"""The policy language server (``policyc lsp``): diagnostics, navigation, completion, fixes
and formatting for editors that speak the Language Server Protocol (docs/lsp.md).

:mod:`.document` compiles one version of a document, :mod:`.index` finds every name in it,
and one module per feature answers from those (:mod:`.diagnostics`, :mod:`.hover`,
:mod:`.navigate`, :mod:`.outline`, :mod:`.complete`, :mod:`.actions`; :mod:`.deep` runs the
deep checks in a child process). :mod:`.server` connects them to the protocol with pygls. The
package is imported only by ``policyc lsp``, so the other commands never load pygls.
"""

from policyc.compiler.exports import exports

__all__, __getattr__ = exports(
    __name__,
    {
        "create": ".server",
        "serve": ".server",
    },
)
