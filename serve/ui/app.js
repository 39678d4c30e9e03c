// Placeholder of the dashboard's script (the pages replace it): shows who
// is logged in, as text.
const res = await fetch('api/whoami');
document.getElementById('app').textContent = JSON.stringify(await res.json());
