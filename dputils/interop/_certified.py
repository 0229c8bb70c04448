"""The certified answer the adapters report (``report="upper"``), with a fallback where the method has none.

The logic lives in the library, :mod:`dputils.accountants.certified` (the saddle-point and Edgeworth
accountants apply it by default, ``fallback="pld"``): where the ``spa`` or ``edgeworth`` certified bracket
failed, is vacuous or is wide (over :data:`RTOL` of its upper end), the PLD accountant's certified bracket on
the same ledger is intersected with it (``details["fallback"] == "pld"``). The ``pld`` and ``rdp``
accountants are reported as they are.
"""

from __future__ import annotations

from ..accountants import registry
from ..accountants.certified import RTOL, certified_answer  # noqa: F401 (re-exported to the adapters)
from ..accountants.certified import own_query as _query  # noqa: F401 (re-exported to the adapters)

#: the accountants whose certified ends may need the fallback: the registered estimates of the common mechanisms
#: (today spa and edgeworth; :mod:`dputils.accountants.registry`)
WITH_FALLBACK = tuple(r.name for r in registry.select(answers="estimate") if r.common_events)
