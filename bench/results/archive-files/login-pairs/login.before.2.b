== login (login only)
users logged in 15000, errors 0; logins/s mean 1875, best second 2003; login p50 2.9 ms, p99 31.2 ms
logins_s: 15000 in 8.0 s (1875/s); server CPU 5.42 s = 361.3 us per unit (67.7% of one core on average)
== idle (login + initial presence to 18 contacts)
users logged in 15000, errors 0; logins/s mean 1875, best second 2066; login p50 155.1 ms, p99 414.7 ms
logins_s: 15000 in 8.0 s (1875/s); server CPU 7.37 s = 491.2 us per unit (92.1% of one core on average)
