"""Adapters that let other libraries use the dputils accountants.

* :mod:`dputils.interop.dp_accounting`: ``make_accountant(name, **options)`` returns a
  ``dp_accounting.PrivacyAccountant`` backed by the dputils ``pld``, ``spa``, ``edgeworth`` or ``rdp``
  accountant; it takes dp_accounting's ``DpEvent`` objects and works with
  ``dp_accounting.mechanism_calibration.calibrate_dp_mechanism`` unchanged.

The submodules import their peer library on import; ``dputils`` itself never imports them.
"""
