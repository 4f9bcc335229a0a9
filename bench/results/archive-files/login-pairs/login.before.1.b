== login (login only)
users logged in 15000, errors 0; logins/s mean 1875, best second 2004; login p50 2.2 ms, p99 29.6 ms
logins_s: 15000 in 8.0 s (1875/s); server CPU 5.11 s = 340.6 us per unit (63.9% of one core on average)
== idle (login + initial presence to 18 contacts)
users logged in 15000, errors 0; logins/s mean 1875, best second 2085; login p50 56.4 ms, p99 223.7 ms
logins_s: 15000 in 8.0 s (1875/s); server CPU 7.34 s = 489.4 us per unit (91.8% of one core on average)
