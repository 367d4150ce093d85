//! Fires timers, due dates and claim expiry, and delivers the notification outbox.
