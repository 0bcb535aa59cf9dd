def render_html(trace: object) -> str:
    raise NotImplementedError
