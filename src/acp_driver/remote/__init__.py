"""ACP over the network: the RFD's Streamable HTTP and WebSocket transports, both roles.

Needs the ``remote`` extra (``pip install 'acp-driver[remote]'``); nothing here is imported by
the stdio path.
"""
