//! The MCP gateway: authentication, the fourteen tools, uploads, the admin API and the web UI.
