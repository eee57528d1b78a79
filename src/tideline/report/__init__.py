"""The report: how the memory behaves over time, as JSON, text or one self-contained HTML page.

:func:`~tideline.report.build.build_report` assembles the data (``Memory.report()``);
:func:`~tideline.report.text.render_text` and :func:`~tideline.report.html.render_html`
render it. ``tideline report [--json | --html FILE]`` is the command.
"""
