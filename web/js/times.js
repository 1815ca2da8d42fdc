// Times: written by the server in UTC (`<time datetime>`), shown in the reader's own time zone.

/**
 * Rewrites each time in `root` (or `root` itself) not rewritten yet: today's as the hour, older ones as the day.
 * @param {Element} root
 */
export function formatTimes(root) {
  const times = root.matches('time[datetime]') ? [root] : root.querySelectorAll('time[datetime]:not([data-local])');
  const today = new Date().toDateString();
  for (const time of times) {
    if (!(time instanceof HTMLTimeElement)) continue;
    const date = new Date(time.dateTime);
    if (Number.isNaN(date.getTime()) || time.dataset.local) continue;
    time.dataset.local = 'yes';
    time.title = date.toLocaleString();
    const sameDay = date.toDateString() === today;
    time.textContent = sameDay
      ? date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })
      : date.toLocaleDateString([], { month: 'short', day: 'numeric' });
  }
}
