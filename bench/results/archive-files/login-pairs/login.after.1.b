== login (login only)
users logged in 15000, errors 0; logins/s mean 1875, best second 2008; login p50 2.2 ms, p99 16.6 ms
logins_s: 15000 in 8.0 s (1875/s); server CPU 5.13 s = 341.9 us per unit (64.1% of one core on average)
== idle (login + initial presence to 18 contacts)
users logged in 15000, errors 0; logins/s mean 1666, best second 2006; login p50 735.2 ms, p99 1290.2 ms
logins_s: 15000 in 9.0 s (1666/s); server CPU 8.21 s = 547.6 us per unit (91.3% of one core on average)
