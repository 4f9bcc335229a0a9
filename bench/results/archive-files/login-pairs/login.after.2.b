== login (login only)
users logged in 15000, errors 0; logins/s mean 1875, best second 2115; login p50 12.5 ms, p99 158.2 ms
logins_s: 15000 in 8.0 s (1875/s); server CPU 6.29 s = 419.4 us per unit (78.6% of one core on average)
== idle (login + initial presence to 18 contacts)
users logged in 15000, errors 0; logins/s mean 1783, best second 3205; login p50 1314.8 ms, p99 2433.0 ms
logins_s: 15000 in 10.0 s (1500/s); server CPU 9.08 s = 605.5 us per unit (90.8% of one core on average)
